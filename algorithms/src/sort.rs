//! Randomised BSP sample sort (BSPlib paper §5.3): being written.
