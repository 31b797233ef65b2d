"""Build stage: compile CUDA sources with nvcc and read ptxas' resource usage."""
