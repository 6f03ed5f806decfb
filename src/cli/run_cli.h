// Runs one qjoule command line (argv[0] is the program's name) and returns its exit status: a command's
// own, 1 for an error (printed on stderr as one line), CLI11's for a usage error, 3 for an internal one.
#pragma once

namespace qjoule::cli {

int run_cli(int argc, char** argv);

}  // namespace qjoule::cli
