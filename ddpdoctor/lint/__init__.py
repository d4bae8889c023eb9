"""Static rules over a user's training script (ast only: never imports or runs it)."""
