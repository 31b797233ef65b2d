"""Parse stage: .ncu-rep, nsys sqlite and program result lines into DataFrames."""
