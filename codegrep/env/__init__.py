"""Docker-free environment: bare mirrors, a shared worktree pool, sandboxed grep/glob/read tools."""
