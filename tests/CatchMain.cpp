// SPDX-License-Identifier: BSL-1.0
// The tests' runner: Catch2's own, with one more option for the build's test
// discovery (tests/cmake/CatchDiscoverTests.cmake):
//   --list-names-and-tags   one line per test the command line selects
//                           (hidden ones only when asked for), the name, a
//                           tab, its tags as written, a tab, then the name of
//                           its source file without folder and extension (the
//                           tag `-#` gives it): `name\t[a][b]\tFutureTest`.
// One run of the executable gives CTest every name and label; listing the
// names, then each tag's tests, started the executable once per tag.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>
#include <string>

int main(int argc, char* argv[]) {
    Catch::Session session;
    bool listNamesAndTags = false;
    session.cli(session.cli() | Catch::clara::Opt(listNamesAndTags)["--list-names-and-tags"](
                                    "list each selected test's name, a tab and its tags"));
    if (int const rc = session.applyCommandLine(argc, argv); rc != 0) {
        return rc;
    }
    if (!listNamesAndTags) {
        return session.run();
    }
    Catch::Config const& config = session.config();
    for (Catch::TestCase const& test :
         Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config)) {
        std::cout << test.name << '\t';
        for (std::string const& tag : test.tags) {
            std::cout << '[' << tag << ']';
        }
        // As Catch2's -# names a file: no folder, no extension.
        std::string file = test.lineInfo.file;
        if (auto const slash = file.find_last_of("\\/"); slash != std::string::npos) {
            file.erase(0, slash + 1);
        }
        if (auto const dot = file.find_last_of('.'); dot != std::string::npos) {
            file.erase(dot);
        }
        std::cout << '\t' << file << '\n';
    }
    std::cout.flush();
    return std::cout ? 0 : 1;
}
