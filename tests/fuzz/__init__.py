"""serQ's mutation fuzzer (tests/fuzz/README.md): seeded mutants of the bundled programs, their
IR, the oracle scenarios and the instance files, each given to the command line, each outcome
put in a class; a traceback, an internal error, a hang or an unlocated refusal is a bug."""
