int f08(void) { return 8; }
