"""The `reme-agent autolink` command only; auto-link itself is `reme_agent.maintenance.autolink`
(algorithms, `Judge` protocol) and `reme_agent.jobs.autolink_job` (the LLM judge)."""
