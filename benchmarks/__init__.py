"""Benchmarks, analysis and the accelerator check: code that measures the library and is not part
of it (the installed package `xlnet_tf2` never imports it). Scripts here run from a checkout as
`python benchmarks/<name>.py`; their shared code is the package `benchmarks.tools`."""
