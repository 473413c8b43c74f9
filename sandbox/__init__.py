"""The box and the host runner.

A :class:`~sandbox.policy.Policy` is computed once per session; a backend turns
``(policy, argv)`` into a :class:`~sandbox.plan.LaunchPlan` (pure data); the supervisor
runs any plan. The backend is chosen once, here, by platform.
"""
