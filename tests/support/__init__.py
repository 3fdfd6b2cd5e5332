"""Helpers the tests share: fleets, servers, clients and waits, each in a module named for what
it holds. Test modules and conftests import these; they never import a test module or a
conftest (tests/test_tests_shape.py keeps it so)."""
