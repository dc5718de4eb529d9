"""CodeGrep as a retrieval sub-agent for any coding agent: the MCP server (``codegrep mcp``) and its benchmark."""
