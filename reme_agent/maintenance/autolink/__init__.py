"""Auto-link (DESIGN §9): hidden relations become visible [[links]] in the notes themselves.

The algorithms, beside the other maintenance algorithms: names and matching, L1 additive
links, L2 "See also", L3 the audited predicate upgrade, L4 the duplicate report, and the
runner. The model's decisions come in through the `Judge` protocol (`judge.py`); the LLM
judge and the queue wiring are in `reme_agent/jobs/autolink_job.py`.
"""
