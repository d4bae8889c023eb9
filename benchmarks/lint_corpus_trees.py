"""Lay out the folder `lint_recall.py --trees DIR` reads: for each repository of the corpus, its
Python files at the commit the corpus names, extracted from a bare git snapshot.

    python benchmarks/lint_corpus_trees.py --mirrors /work/.mirror --out /tmp/lint_trees

A snapshot is looked for at MIRRORS/owner+name/repo (what the team's `fetch` tool writes; its
`.git` when the snapshot is a clone with a work tree) or
MIRRORS/owner+name(.git); any bare clone works (`git clone --bare URL MIRRORS/owner+name`). Only
`*.py` and `pyproject.toml` files are extracted: large data files are often absent from
snapshots, and lint reads nothing else. Never extract into the project itself."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def git_dir(mirrors: str, repo: str) -> str | None:
    name = repo.replace("/", "+")
    for cand in (f"{name}/repo/.git", f"{name}/repo", name, f"{name}.git"):
        path = os.path.join(mirrors, cand)
        if os.path.isdir(path):
            return path
    return None


def extract(gdir: str, commit: str, dest: str) -> None:
    """`git archive COMMIT -- '*.py' | tar -x -C dest`, without a shell."""
    os.makedirs(dest, exist_ok=True)
    names = subprocess.run(
        ["git", f"--git-dir={gdir}", "ls-tree", "-r", "--name-only", commit],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    wanted = [n for n in names if n.endswith(".py") or n.endswith("pyproject.toml")]
    archive = subprocess.Popen(
        ["git", f"--git-dir={gdir}", "archive", commit, "--", *wanted], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, check=True)
    archive.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--out", required=True)
    parser.add_argument("--corpus", default=os.path.join(HERE, "lint_corpus.jsonl"))
    args = parser.parse_args()
    pairs: dict[tuple[str, str], None] = {}
    with open(args.corpus, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                pairs[(row["repo"], row["commit"])] = None
    missing = 0
    for repo, commit in pairs:
        gdir = git_dir(args.mirrors, repo)
        if gdir is None:
            print(f"missing snapshot: {repo}", file=sys.stderr)
            missing += 1
            continue
        extract(gdir, commit, os.path.join(args.out, repo.replace("/", "+")))
        print(f"{repo}@{commit[:12]} -> {args.out}/{repo.replace('/', '+')}")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
