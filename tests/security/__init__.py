"""Attack tests: each trust boundary tried as an attacker would (see docs/security.md)."""
