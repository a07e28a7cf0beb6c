#!/usr/bin/env bash
# Debian's python3 (with python3-yaml), not the first python3 on PATH.
exec /usr/bin/python3 "${TEST_SRCDIR}/graphrun/tests/deploy/kubernetes_test.py"
