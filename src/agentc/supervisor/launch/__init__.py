"""One launch: its request, plan and execution, the root launch, run directories, the
prompt, tokens, preflight (personal and host) and the candidate shell.
"""
