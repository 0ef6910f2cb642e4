// The doctest runner of attnjit_unit_tests (every other file in tests/unit/ holds test cases).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
