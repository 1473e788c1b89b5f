"""Benchmarks behind ``jobsched bench``: cost per million runs (:mod:`.pipeline`, priced by
:mod:`.pricing`) and the embedded-mode schedule lag (:mod:`.lag`); :mod:`.report` formats both."""
