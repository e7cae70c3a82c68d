/* Appended to Emscripten's emmalloc.c by mk/wasm.mk (it uses that file's statics).
 *
 * emmalloc grows the heap by the whole request even when a free region already ends at the
 * top of the heap: after a 2 GiB block is freed, 2.1 GiB would need 4.1 GiB of address space
 * and fail. The new space is merged with that free region (claim_more_memory), so only the
 * difference needs claiming. */
size_t msda_emmalloc_claim_size(size_t numBytes);
size_t msda_emmalloc_claim_size(size_t numBytes)
{
  if (!listOfAllRegions)
    return numBytes;
  uint8_t *end = (uint8_t *)((uint32_t *)listOfAllRegions)[2];
  if (end != (uint8_t *)sbrk(0))
    return numBytes; /* someone else moved sbrk: the new space will not be contiguous */
  Region *last = prev_region((Region *)(end - sizeof(Region)));
  if (!region_is_free(last) || last->size >= numBytes)
    return numBytes;
  return numBytes - last->size;
}
