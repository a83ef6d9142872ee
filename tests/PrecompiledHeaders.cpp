// SPDX-License-Identifier: BSL-1.0
// The translation unit that builds the tests' precompiled header
// (tests/CMakeLists.txt, COEXEC_TEST_PCH): Catch2 and coexec.h. It defines
// nothing; every test executable reuses the header it precompiles.
