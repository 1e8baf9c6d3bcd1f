"""The example's blog hosting: blogs, posts and comments."""
