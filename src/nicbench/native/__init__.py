"""nicbench's native tools, shipped as sources (``nbgen/``: the XDP packet
generator, GPL-2.0 like the kernel programs it loads) and built on the user's
machine by ``nicbench setup`` (:mod:`.build`)."""
