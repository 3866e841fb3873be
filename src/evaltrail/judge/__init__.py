"""Judged evaluation: pairwise battles between models' answers, rated like the leaderboard."""
