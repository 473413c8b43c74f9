"""pathguard: where hook files may live, paths walked as the kernel walks them."""
