// placeviz: where did the placement put each variable, and what crosses
// tasks? See tools/placeviz.h and docs/placement.md.
#include <iostream>
#include <string>
#include <vector>

#include "tools/file_util.h"
#include "tools/placeviz.h"

int main(int argc, char** argv) {
  graphrun::tools::QuietProtobufLogs();
  return graphrun::tools::FinishStdout(
      graphrun::tools::PlacevizMain(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                    std::cerr),
      std::cerr);
}
