"""Lineage: what dvc.lock recorded, and the walk from a leaderboard number back to its inputs."""
