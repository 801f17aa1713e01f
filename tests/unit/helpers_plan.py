"""A minimal valid plan for unit tests that add keys to it."""

PLAN = '''name = "t"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[study]
io_sizes = ["128K"]
connections = [1]
'''
