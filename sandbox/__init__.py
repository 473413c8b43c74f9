"""The box and the host runner.

The ``[sandbox]`` table (:mod:`sandbox.settings`) becomes a
:class:`~sandbox.policy.Policy` once per session (:meth:`Policy.from_settings`); the
backend is chosen once, in :func:`sandbox.dispatch.choose`, and turns ``(policy, argv)``
into a :class:`~sandbox.plan.LaunchPlan` (pure data); the supervisor
(:mod:`sandbox.process.supervisor`) runs any plan. Nothing here imports ``launchers``.
"""
