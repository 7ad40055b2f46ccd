"""Recall-quality evals for reme-agent (F4): datasets as real vaults, ablations, reports.

Run with `reme-agent eval --dataset synthetic|locomo|cmrc|all`; see evals/README.md.
"""
