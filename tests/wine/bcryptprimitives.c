/*
 * Minimal stand-in for Windows' bcryptprimitives.dll, for running Rust
 * programs under Wine versions that do not ship it (Wine < 9.x).
 *
 * Rust's std (>= 1.78) imports ProcessPrng from bcryptprimitives.dll for
 * HashMap seeds and other randomness. Here it is forwarded to advapi32's
 * SystemFunction036 (a.k.a. RtlGenRandom), which Wine does implement.
 *
 *   BOOL WINAPI ProcessPrng(PBYTE pbData, SIZE_T cbData);
 *
 * The real ProcessPrng never fails (it always returns TRUE); we return
 * FALSE only if RtlGenRandom itself fails.
 */
#include <windows.h>

/* advapi32!SystemFunction036; declared here to avoid ntsecapi.h quirks. */
__declspec(dllimport) BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE pbData, SIZE_T cbData)
{
    /* RtlGenRandom takes a ULONG (32-bit) length; SIZE_T is 64-bit. */
    while (cbData > 0) {
        ULONG chunk = cbData > 0x40000000u ? 0x40000000u : (ULONG)cbData;
        if (!SystemFunction036(pbData, chunk))
            return FALSE;
        pbData += chunk;
        cbData -= chunk;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE hinst, DWORD reason, LPVOID reserved)
{
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH)
        DisableThreadLibraryCalls(hinst);
    return TRUE;
}
