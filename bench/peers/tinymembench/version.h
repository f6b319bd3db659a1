#define VERSION "0.4.9"
