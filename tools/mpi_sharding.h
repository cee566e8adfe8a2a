#pragma once
// Spreads `planner search` over MPI ranks: each rank evaluates every size-th candidate, rank 0
// gathers (candidate, objective) pairs, ranks them exactly as one process would, and re-evaluates the
// kept ones to print. Only built where MPI is found.
#include "planner_commands.h"

namespace trainsim {

// Initialises MPI when the process was started by mpirun (and only then); returns the sharding.
Sharding mpi_start(int* argc, char*** argv);
void mpi_stop();

}  // namespace trainsim
