"""The aggregate stage's library: every cell's summary into cross-scenario views.

`leaderboard` (every metric with its CI, in CSV, Markdown and JSON), `families` (HELM's win rates
per metric family), `pairwise` (significance of model differences), `reproduction` (published
numbers against ours), `plots`, `battle_log` and `ranking` (judged battles)."""
