"""The job lifecycle as two pure functions: `decide` (the rules, `decide.py`) and `evolve` (the fold,
`evolve.py`). Import from the modules themselves: the client needs only a few of them."""
