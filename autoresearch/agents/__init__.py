"""The agents: the backends that do a team's work (Claude, the no-key ones), the tools
they may call, their briefs, what a conversation has been shown, one agent run, and
the cost ledger."""
