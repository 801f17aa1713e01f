"""The UDP throughput study: runner (execution side), analysis and view (results side)."""
