"""What every platform's box is and shares: the :class:`~sandbox.box.base.Box` protocol
and its base, a run through the supervisor (:func:`~sandbox.box.base.supervised`), the
host runner of ``sandbox = false`` hooks (:mod:`.host`), the session's hardening
(:mod:`.harden`), the kind in force (:mod:`.kind`) and why a failed command failed
(:mod:`.hints`). Which platform's box a session gets is :mod:`sandbox.dispatch`'s.
"""
