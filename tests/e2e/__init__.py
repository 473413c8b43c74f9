"""The checkout as a user and CI meet it: the demo, the wheel, the docs, the CI check."""
