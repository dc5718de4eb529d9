"""The retrieval agent: protocol (prompt, tool-call parsing, observations), policies, models, episode loop."""
