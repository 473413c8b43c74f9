"""The Linux boxes and all they stand on: bwrap's box of namespaces (:mod:`.linuxbox`,
:mod:`.bwrap`), its kind where a fresh ``/proc`` is refused, the Landlock box where
namespaces are (:mod:`.landlockbox`); the hardening, the filter, the stage, root's
stand-in, and why a box could not be built (:mod:`.causes`)."""
