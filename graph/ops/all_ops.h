// Op schema registration. Each function registers one family of ops into
// the registry it is given; RegisterAllOps calls them all.
#ifndef GRAPHRUN_GRAPH_OPS_ALL_OPS_H_
#define GRAPHRUN_GRAPH_OPS_ALL_OPS_H_

#include "graph/op_registry.h"

namespace graphrun {

void RegisterArrayOps(OpRegistry& r);        // array_ops.cc
void RegisterMathOps(OpRegistry& r);         // math_ops.cc
void RegisterNnOps(OpRegistry& r);           // nn_ops.cc
void RegisterStateOps(OpRegistry& r);        // state_ops.cc
void RegisterRandomOps(OpRegistry& r);       // random_ops.cc
void RegisterControlFlowOps(OpRegistry& r);  // control_flow_ops.cc
void RegisterRuntimeOps(OpRegistry& r);      // runtime_ops.cc: _Send/_Recv/_Arg/_Retval
void RegisterDatasetOps(OpRegistry& r);      // dataset_ops.cc
void RegisterIoOps(OpRegistry& r);           // io_ops.cc: SaveV2/RestoreV2/…
void RegisterConvOps(OpRegistry& r);         // conv_ops.cc: conv, pooling, batch norm
void RegisterTrainingOps(OpRegistry& r);     // training_ops.cc: optimizers, scatter
void RegisterGradOps(OpRegistry& r);        // grad_ops.cc: BroadcastGradientArgs, InvertPermutation
void RegisterQueueOps(OpRegistry& r);       // queue_ops.cc: queues, accumulators
void RegisterDataFlowOps(OpRegistry& r);    // data_flow_ops.cc: DynamicPartition/Stitch
void RegisterCollectiveOps(OpRegistry& r);  // collective_ops.cc: V2 all-reduce/gather/bcast
void RegisterParsingOps(OpRegistry& r);     // parsing_ops.cc: ParseExample, ParseExampleV2

void RegisterAllOps(OpRegistry& r);

// The default registry holding every op above, built on first use.
const OpRegistry& DefaultOpRegistry();

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_OPS_ALL_OPS_H_
