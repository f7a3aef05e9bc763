//! Work assignment: partitions dealt among the live members of a group.

// The recipe that uses the assignment comes with the next change.
#![cfg_attr(not(test), allow(dead_code))]

mod assign;
