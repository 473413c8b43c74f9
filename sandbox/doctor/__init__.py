"""What ``doctor`` reports: whether the box works here (:mod:`.probe`), and what is in
force (:mod:`.inforce`)."""
