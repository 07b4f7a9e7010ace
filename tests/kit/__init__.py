"""Helpers every test package shares: a throwaway PostgreSQL (`pg`), a live coordinator (`live`)."""
