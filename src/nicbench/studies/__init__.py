"""The studies: one folder each (runner, analysis, view), one line each in ``nicbench.registry``."""
