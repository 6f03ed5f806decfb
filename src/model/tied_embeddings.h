// A tied decoder's token embeddings read from its head's rows: the checkpoint stores one matrix for both,
// and where the head holds it exactly as stored (FP32 rows, or a BF16 checkpoint's words as BF16 rows),
// the embedding lookup reads those rows instead of a second copy (Llama 3.2's 128k x 2048 table: 525 MB
// less in BF16). A head held otherwise (quantized, packed into panels, on a GPU) leaves the embeddings
// held apart, as the console's `head` line says.
#pragma once

#include <cstdint>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/model/graph_ops.h"

namespace qjoule::model {

// A CPU tensor viewing `head`'s rows when they hold exactly the embeddings read from the checkpoint
// (`f32`, or `bf16` as stored: whichever is not empty; compared value for value), else an empty tensor.
// A scaled lookup (Gemma's sqrt(hidden)) reads BF16 rows only: the FP32 table is scaled as held.
// The view lives as long as the head does.
Tensor tied_embeddings_view(const kernels::Linear& head, const std::vector<float>& f32,
                            const std::vector<uint16_t>& bf16, float embedding_scale);

}  // namespace qjoule::model
