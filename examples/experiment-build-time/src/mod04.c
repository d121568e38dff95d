int f04(void) { return 4; }
