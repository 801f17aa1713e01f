"""``nicbench serve``: the archive as server-rendered web pages (a front end, like ``cli/``)."""
