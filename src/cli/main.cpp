// qjoule: measure what quantizing a transformer buys, in milliseconds, joules and accuracy.
#include "bench/peak_rss.h"
#include "cli/run_cli.h"

int main(int argc, char** argv) {
  qjoule::bench::fix_heap_thresholds();  // before anything is allocated: peak memory independent of history
  return qjoule::cli::run_cli(argc, argv);
}
