"""Static rules over a user's training script (ast only: never imports or runs it)."""

from ddpdoctor.lint.engine import lint_paths, lint_source
from ddpdoctor.lint.finding import LintFinding, Related
from ddpdoctor.lint.rules import RULES, RULES_BY_CODE, Rule

__all__ = ["RULES", "RULES_BY_CODE", "LintFinding", "Related", "Rule", "lint_paths", "lint_source"]
