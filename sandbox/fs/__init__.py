"""Paths, found and handled without following a link: below a folder (:mod:`.beneath`),
the system's temp folder, a program on a PATH, digests, links made again."""
